"""hpctwin power package: node power, conversion losses, caps, cooling and energy accounting.

* `power.config`: validation of a system file's ``[power]`` and ``[cooling]`` tables;
* `power.chain`: machine layout and the conversion chain (node DC-DC, chassis rectifiers, CDUs);
* `power.profiles`: job utilisation profiles and the runtime stretch of capped jobs;
* `power.model`: `PowerModel`, the `twin.model_api.RunModel` the simulation steps;
* `power.cooling` / `power.fmu`: the built-in thermal model and the optional FMU back-end;
* `power.stepseries`: exact integrals of piecewise-constant series; `power.replay`: drive a model
  without the engine.
"""
from hpctwin.power.config import PowerConfig, PowerConfigError, CoolingConfig, parse_power, parse_cooling

__all__ = ["PowerConfig", "PowerConfigError", "CoolingConfig", "parse_power", "parse_cooling", "PowerModel"]


def __getattr__(name):  # lazy: importing power.model pulls in the engine's model API
    if name == "PowerModel":
        from hpctwin.power.model import PowerModel  # noqa: PLC0415 - lazy module attribute
        return PowerModel
    raise AttributeError(name)
