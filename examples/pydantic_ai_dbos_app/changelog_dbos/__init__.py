"""A CHANGELOG agent written as a Pydantic AI + DBOS user writes one, hosted unmodified by crashmatrix."""
