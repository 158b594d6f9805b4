"""Keeping count of widgets in stock."""

from collections import Counter

from widgets.core import Widget


class Inventory:
    """Counts widgets by name."""

    def __init__(self) -> None:
        self._stock: Counter[str] = Counter()

    def add(self, widget: Widget, quantity: int = 1) -> None:
        """Put ``quantity`` widgets in stock."""
        self._stock[widget.name] += quantity

    def take(self, name: str) -> bool:
        """Take one widget out of stock; False when none is left."""
        if self._stock[name] <= 0:
            return False
        self._stock[name] -= 1
        return True

    def total(self) -> int:
        return sum(self._stock.values())
