"""When a message was said, made storable on the way in: aware, in UTC, and a moment PostgreSQL and
its driver give back as it went in.

asyncpg writes 0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999999Z as -infinity and infinity and reads
them back as *naive* datetimes: a memory dated there could not be indexed (`.timestamp()` of a naive
year 1 is "year 0 is out of range"). Both edges are inside the documented range (years 1 to 9999), so
they are clamped one microsecond inwards rather than refused.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

_TICK = timedelta(microseconds=1)
EARLIEST = datetime.min.replace(tzinfo=UTC) + _TICK
LATEST = datetime.max.replace(tzinfo=UTC) - _TICK


def storable_moment(moment: datetime) -> datetime | None:
    """The moment in UTC (a naive one is UTC), clamped to [EARLIEST, LATEST]; None past year 9999 or
    before year 1 in UTC (no date a chat was sent)."""
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    try:
        in_utc = aware.astimezone(UTC)
    except OverflowError:
        return None
    return min(max(in_utc, EARLIEST), LATEST)
