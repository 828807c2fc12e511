"""OpenTelemetry export of run events (``io_harness.otel`` is the public face).

``_names.py`` holds the attribute names and the ``error.type`` values,
``_content.py`` the opt-in content as the GenAI conventions' JSON,
``_metrics.py`` the two client metrics, ``_spans.py`` what an observer keeps
while runs are open, ``_whole.py`` the spans one event makes whole (a model
call's attempt, a check), and ``_observer.py`` the observer itself.
"""
