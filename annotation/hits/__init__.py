"""The HIT a worker sees: what its page needs (``page``) and tells them (``guide``), who may read a crowd HIT's items
(``access``), the next HIT handed out from a pool Paraforge serves itself (``taking``), the page's signed tokens
(``tokens``) and saving a worker's judgments (``submissions``)."""
