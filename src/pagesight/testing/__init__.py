"""Contract suites that a package adding a store or a visual encoder runs in its own tests, as the
project runs them in its own: ``pagesight.testing.store.StoreContract`` (a pytest class to
subclass with the store's location) and ``pagesight.testing.encoder.assert_encoder_contract``
(what every visual encoder promises). They need the test tools (pytest, pytest-timeout), which
the package itself does not.
"""
