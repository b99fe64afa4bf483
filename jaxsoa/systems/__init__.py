"""Domain physics built on the engine: `orbit`, `tether`, `stewart`, `flexible`."""

from jaxsoa.systems import flexible, orbit, stewart, tether

__all__ = ["flexible", "orbit", "stewart", "tether"]
