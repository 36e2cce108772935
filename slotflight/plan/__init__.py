"""The slot plan: what a schema compiles to, and the compiler that builds it.

- :mod:`.model`: :class:`Slot`, :class:`SlotPlan`, the object and array nodes.
- :mod:`.schema_walk`: reading a JSON Schema document (references, wrappers).
- :mod:`.compiler`: a Pydantic model or JSON Schema in, a plan out.
- :mod:`.pydantic_schema`: a Pydantic model's schema and instances as its validation reads them.
- :mod:`.tree`: the plan as a tree of objects, arrays and slots.

Nothing here knows about frame syntaxes, prompts or streams.
"""
