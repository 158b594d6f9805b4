"""Widgets: small immutable shapes that know how to render themselves."""

from widgets.core import Widget, make_widget

__all__ = ["Widget", "make_widget"]
