"""The widget model."""

from dataclasses import dataclass, replace

DEFAULT_SIZE = 3


@dataclass(frozen=True)
class Widget:
    """An immutable widget with a name and a square size."""

    name: str
    size: int = DEFAULT_SIZE

    def render(self) -> str:
        """Draw the widget as a square of its initial letter."""
        row = self.name[:1].upper() * self.size
        return "\n".join(row for _ in range(self.size))

    def resized(self, size: int) -> "Widget":
        """A copy of this widget with another size."""
        if size <= 0:
            raise ValueError(f"size must be positive, got {size}")
        return replace(self, size=size)


def make_widget(name: str, size: int = DEFAULT_SIZE) -> Widget:
    """Create a widget, validating its name."""
    if not name.strip():
        raise ValueError("a widget needs a name")
    return Widget(name=name.strip(), size=size)
