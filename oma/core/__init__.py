"""The core of OMA on Temporal: pydantic models and pure logic.

No I/O, no Temporal client, no provider SDK: the workflows run this code
(deterministically, inside the Temporal sandbox) and so do the activities and
the composition roots. It imports nothing from ``oma.workflows``,
``oma.activities`` or the roots (``make lint`` checks it).
"""
