"""Which parts of a web page are chrome (navigation, sidebars, footers, banners) and are stripped
before capture: a generic default plus per-site rules, each switched on by a detector selector.

A rule applies to every page whose DOM matches its ``detect`` selector (``None``: every page). New
rules slot in with :func:`register_rule`; rules are part of how a page renders, so changing them
changes the pixels of pages rendered afterwards (re-render an index after editing them).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StripRule:
    name: str
    detect: str | None  # CSS selector that identifies the site or generator; None matches every page
    strip: tuple[str, ...]  # CSS selectors of the elements removed
    css: str = ""  # style added after stripping, e.g. to take back the margin a removed sidebar left


GENERIC = StripRule(
    "generic",
    None,
    (
        "nav",
        "aside:not(.footnote):not(.footnote-list):not([role=note])",  # Sphinx and docutils footnotes are content
        "footer",
        "body > header",
        "[role=navigation]",
        "[role=banner]",
        "[role=contentinfo]",
        "[role=complementary]",
        "[role=search]",
        "[aria-label*=breadcrumb i]",
        ".breadcrumb",
        ".breadcrumbs",
        ".skip-link",
        ".sr-only",
        "#cookie-banner",
        "[id*=cookie i]",
        "[class*=cookie i]",
        "[id*=consent i]",
        "[class*=consent i]",
        "[class*=gdpr i]",
        "iframe",
    ),
)

MEDIAWIKI = StripRule(
    "mediawiki",  # Wikipedia and the Kiwix (mwoffliner) layout
    "#mw-content-text, body.mediawiki, .mw-body",
    (
        "#mw-navigation",
        "#mw-head",
        "#mw-panel",
        "#mw-page-base",
        "#mw-head-base",
        ".vector-header-container",
        ".vector-column-start",
        ".vector-page-toolbar",
        ".vector-sticky-header",
        "#siteNotice",
        "#jump-to-nav",
        ".mw-jump-link",
        ".mw-editsection",
        "#toc",
        ".toc",
        ".navbox",
        ".vertical-navbox",
        ".sistersitebox",
        ".metadata.mbox-small",
        ".printfooter",
        "#catlinks",
        "#footer",
        ".mw-footer",
        "#mw-hidden-catlinks",
        ".noprint",
        "#kiwix-banner",
        "#kiwixtoolbar",
    ),
    "#content.mw-body, .mw-body { margin-left: 0 !important; }",
)

SPHINX = StripRule(
    "sphinx",  # Sphinx documentation (docs.python.org and the Debian python3-doc packages)
    "div.sphinxsidebar, div.related, div.documentwrapper",
    (
        "div.related",
        "div.sphinxsidebar",
        "div.footer",
        "div.mobile-nav",
        "#menuToggler",
        ".menu-wrapper",
        ".headerlink",
        "#search-results",
        "div.inline-search",
        ".version_switcher_placeholder",
        ".language_switcher_placeholder",
    ),
    "div.bodywrapper { margin-left: 0 !important; } div.document { width: auto !important; }",
)

_RULES: list[StripRule] = [GENERIC, MEDIAWIKI, SPHINX]


def register_rule(rule: StripRule) -> None:
    """Add (or replace, by name) a per-site rule."""
    _RULES[:] = [r for r in _RULES if r.name != rule.name] + [rule]


def rules() -> list[StripRule]:
    return list(_RULES)


def rules_json(names: tuple[str, ...] | None = None) -> list[dict]:
    """The rules as the capture script takes them; ``names`` picks some (default: all)."""
    chosen = [r for r in _RULES if names is None or r.name in names]
    return [{"name": r.name, "detect": r.detect, "strip": list(r.strip), "css": r.css} for r in chosen]


__all__ = ["GENERIC", "MEDIAWIKI", "SPHINX", "StripRule", "register_rule", "rules", "rules_json"]
