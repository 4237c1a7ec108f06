"""The launcher: a small C process that starts local commands for washout and times them
(``launch.c``; built by :mod:`.build`, spoken to by :mod:`.client`)."""
