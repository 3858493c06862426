"""Small arithmetic shared by the core and the worker."""


def cdiv(a: int, b: int) -> int:
    """Ceiling division: blocks needed for ``a`` tokens at ``b`` per block."""
    return -(-a // b)
