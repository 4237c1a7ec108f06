"""Where trials live and how they are read and written.

The store (``store``: one SQLite file per experiment), the long format every analysis reads
(``longformat``), readers of other tools' files (``importers``), the choice between them for a
path (``sources``), and the writers of the long format (``export``, ``outputs``).
"""
