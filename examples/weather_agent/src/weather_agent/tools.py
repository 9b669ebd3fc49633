"""The agent's tools, registered in its own registry."""

from __future__ import annotations

import os

from openprogram import Runtime, ToolRegistry, agentic_function, function

registry = ToolRegistry()

# A tiny, deterministic "weather service" (a real agent would call an API here).
_READINGS = {"paris": 12.0, "oslo": -3.5, "cairo": 31.0}


@function(registry=registry, toolset="weather")
def get_weather(city: str) -> dict[str, object]:
    """The current weather in a city.

    Args:
        city: The city's name.
    """
    celsius = _READINGS.get(city.strip().lower())
    if celsius is None:
        raise ValueError(f"no weather station in {city!r}")
    return {"city": city, "celsius": celsius, "sky": "clear" if celsius > 10 else "cloudy"}


@function(registry=registry, toolset="weather")
def convert(celsius: float, unit: str = "fahrenheit") -> float:
    """Convert a Celsius temperature.

    Args:
        celsius: The temperature in degrees Celsius.
        unit: "fahrenheit" or "kelvin".
    """
    if unit == "fahrenheit":
        return round(celsius * 9 / 5 + 32, 1)
    if unit == "kelvin":
        return round(celsius + 273.15, 2)
    raise ValueError(f"unknown unit {unit!r}; use fahrenheit or kelvin")


@function(registry=registry, requires_env="BOOKING_API_KEY", unsafe_in="chat")
def book_flight(city: str, date: str) -> str:
    """Book a flight (only offered when BOOKING_API_KEY is set, never in chat).

    Args:
        city: Where to fly.
        date: The day, YYYY-MM-DD.
    """
    return f"booked a flight to {city} on {date} (account {os.environ['BOOKING_API_KEY'][:4]})"


@agentic_function(registry=registry)
def plan_trip(city: str, runtime: Runtime) -> str:
    """Plan a trip to a city: a nested run that checks the weather first.

    Args:
        city: Where to go.
    """
    prompt = f"Plan a day in {city}. Check the weather first."
    return str(runtime.exec(prompt, tools=[get_weather, convert]))
