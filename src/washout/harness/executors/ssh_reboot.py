"""Reboot resets of an SSH worker: issue the reboot command, wait for the connection to
drop, reconnect with backoff within the reset timeout and check that the boot id changed."""

from __future__ import annotations

import asyncio

from washout.errors import WashoutError
from washout.harness.executors.base import CommandOptions, tail
from washout.harness.executors.ssh_connection import SSHConnection
from washout.harness.executors.ssh_copy import RunCommand

DEFAULT_BOOT_ID = "cat /proc/sys/kernel/random/boot_id"
DEFAULT_REBOOT = 'if [ "$(id -u)" = 0 ]; then reboot; else sudo -n reboot; fi'
"""Reboot as root directly, otherwise through passwordless sudo (``-n``: fail, never prompt)."""


async def boot_id(link: SSHConnection, run: RunCommand) -> str | None:
    """The worker's boot id now; None if the connection dropped while reading it."""
    command = link.worker.boot_id_command or DEFAULT_BOOT_ID
    result = await run(command, CommandOptions(timeout=30))
    if result.status == "lost":
        return None
    value = result.stdout.decode("utf-8", errors="replace").strip()
    if result.status != "ok" or not value:
        raise WashoutError(
            f"{link.where()}: boot_id_command = {command!r}: {result.reason or 'printed nothing'}"
        )
    return value


async def reboot(link: SSHConnection, run: RunCommand, timeout: float, command: str | None) -> str:
    """Reboot the worker and wait until it is back with a new boot id.

    Issue the reboot command, wait until the connection drops (the worker is going
    down), then reconnect with backoff until SSH answers with a new boot id: a machine
    shutting down may still accept a connection for a moment, so an unchanged boot id
    means "look again later" until ``timeout`` seconds (``[reset] timeout``) have passed
    since the command. The command is the worker's ``reboot_command``, else ``command``
    (the reset's), else DEFAULT_REBOOT. Returns what happened, for the store.
    """
    loop = asyncio.get_running_loop()
    start = loop.time()
    deadline = start + timeout
    before = await boot_id(link, run)
    if before is None:
        raise WashoutError(f"{link.where()}: the connection dropped before the reboot")
    command = link.worker.reboot_command or command or DEFAULT_REBOOT
    conn = link.current()
    result = await run(command, CommandOptions(timeout=min(30.0, timeout)))
    if result.status in ("failed", "timeout"):
        err = tail(result.stderr, 300).strip().replace("\n", " | ")
        raise WashoutError(
            f"{link.where()}: reboot command {command!r} {result.status}: "
            f"{result.reason}{': ' + err if err else ''}"
        )
    if conn is not None:
        try:
            await asyncio.wait_for(conn.wait_closed(), max(0.0, deadline - loop.time()))
        except TimeoutError:
            raise WashoutError(
                f"{link.where()}: still up {timeout:g} s after the reboot "
                f"command {command!r} (reset.timeout)"
            ) from None
    gone = loop.time() - start
    delay = 0.5
    while True:
        link.drop()
        await link.reconnect(
            max(0.0, deadline - loop.time()),
            f"SSH did not answer again after the reboot (reset.timeout = {timeout:g} s)",
        )
        after = await boot_id(link, run)
        if after is not None and after != before:
            break
        if loop.time() + delay >= deadline:
            raise WashoutError(
                f"{link.where()}: boot id still {before} {timeout:g} s "
                f"after the reboot command {command!r} (reset.timeout): "
                "the worker did not reboot"
            )
        await asyncio.sleep(delay)
        delay = min(delay * 2, 5.0)
    back = loop.time() - start
    return (
        f"reboot: {command}; gone after {gone:.1f} s, SSH back after {back:.1f} s; "
        f"boot id {before} -> {after}"
    )
