"""Embedding tier: a model backend, the catalogue's descriptions embedded once, cosine top-K."""
