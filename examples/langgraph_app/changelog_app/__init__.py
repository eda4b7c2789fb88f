"""A CHANGELOG agent written as a LangGraph user writes one, hosted unmodified by crashmatrix."""
