"""Floor 5, ingest: reads of the outside world turned into `Frame`s. Imports config, the store and
the leaves (never rules, session or above).

Offers the feeds (`Feed`, `LiveFeed`, `ReplayFeed`, `RecordingFeed`; the front door's
`CanaryFeed`, canary_feed) and the one loop `sample`
(feeds), the one assembler `open_feed` (open_feed), the exposition parser (exposition),
recordings and bundles (recorder, bundle), a recording"s window with its earlier facts
(excerpt), the data-quality checks (quality), and one window of a feed sampled then closed
(`window_frames`, window). The sources themselves are in `sources`.
"""

__all__ = [
    "bundle",
    "canary_feed",
    "excerpt",
    "exposition",
    "exposition_lines",
    "exposition_writer",
    "feed_status",
    "feeds",
    "open_feed",
    "openmetrics_strict",
    "poller",
    "quality",
    "recorder",
    "sources",
    "window",
]
