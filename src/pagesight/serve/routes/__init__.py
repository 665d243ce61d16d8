"""The HTTP API's routes, a router per group, each reading the server's state through ``Depends``
(``common.Server``)."""

from pagesight.serve.routes import documents, images, search, status

ROUTERS = (status.router, search.router, images.router, documents.router)
