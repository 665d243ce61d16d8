"""The lock of PDFium, a module of its own so that every module calling PDFium takes it without
importing another (``render/sources.py`` imports ``render/office.py``, which counts the pages of
the PDFs LibreOffice makes).

PDFium is not thread-safe, not even across documents: every call into it in this process, from any
thread (a server's requests, its MCP tools, an ingestion), is made holding this lock.
"""

import threading

PDFIUM_LOCK = threading.RLock()
