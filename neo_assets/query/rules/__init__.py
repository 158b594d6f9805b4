"""Rules of reading the knowledge base: which rows are true (truth), how hits are ranked
(ranking), what a search request may ask (request)."""
