"""The story page's pictures, drawn as server-rendered SVG (templates/extraction/partials/story_timeline.html and
relationship_graph.html): the timeline of scenes and threads (`timeline.py`), the relationship graph (`graph.py`),
both laid out here with every label placed where it fits (`geometry.py`), from what `reads.py` reads."""

from apps.extraction.services.story_pictures.reads import relationship_graph, story_timeline
from apps.extraction.services.story_pictures.timeline import window_parse

__all__ = ["relationship_graph", "story_timeline", "window_parse"]
