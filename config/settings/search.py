"""How memory search ranks (apps/memories/search, docs/SEARCH.md): its weights, floors and sizes, from the
environment. Kept apart from base.py, which imports it."""

import environ

env = environ.Env()

# Memory search (apps/memories/search/): the multi-signal score of entity-core (docs/GLOSSARY.md), with text
# ranking fused in.
LOREKEEPER_SEARCH = {
    "weights": {
        "relevance": env.float("LOREKEEPER_SEARCH_W_RELEVANCE", default=0.8),
        "recency": env.float("LOREKEEPER_SEARCH_W_RECENCY", default=0.05),
        "graph": env.float("LOREKEEPER_SEARCH_W_GRAPH", default=0.05),
        "instance": env.float("LOREKEEPER_SEARCH_W_INSTANCE", default=0.1),
        # A chat turn spoken by someone the query names (bench/locomo_recall.py: 97% of the turns answering a
        # question that names a speaker are that speaker's).
        "speaker": env.float("LOREKEEPER_SEARCH_W_SPEAKER", default=0.1),
        # A memory whose story time falls in a date the query names ("in May 2023", "on 9 October, 2022").
        "time": env.float("LOREKEEPER_SEARCH_W_TIME", default=0.2),
    },
    # A date the query names still matches this many days after it: a message tells of a day after it passed.
    "time_slack_days": env.int("LOREKEEPER_SEARCH_TIME_SLACK_DAYS", default=7),
    "recency_per_day": env.float("LOREKEEPER_SEARCH_RECENCY_PER_DAY", default=0.007),
    "min_score": env.float("LOREKEEPER_SEARCH_MIN_SCORE", default=0.0),
    # A memory is a match by meaning only from this cosine similarity to a query sentence up: every query has
    # nearest neighbours, and under the floor they are noise. Each model has its own scale: the local model's floor
    # is measured (bench/locomo_recall.py: 0.35 would find 0.8 point more at recall_any@10, but a paraphrase with no
    # word in common, "her sibling" for "my brother", scores 0.31); another model gets `min_similarity`, which only
    # drops what is nearly unrelated.
    "min_similarity": env.float("LOREKEEPER_SEARCH_MIN_SIMILARITY", default=0.2),
    # A query the local model reads no word of (apps/memories/embeddings.py reads_words) is matched by its words
    # alone: the vector of a string of no language is made of word pieces, a little near everything.
    "meaning_needs_a_known_word": env.bool("LOREKEEPER_SEARCH_MEANING_NEEDS_A_KNOWN_WORD", default=True),
    "min_similarity_by_model": {
        "local:all-MiniLM-L6-v2": env.float("LOREKEEPER_SEARCH_MIN_SIMILARITY_MINILM", default=0.3),
    },
    "max_sentences": 5,
    "candidates": env.int("LOREKEEPER_SEARCH_CANDIDATES", default=100),
    # HNSW candidate list: 100 gave recall@10 0.92 against exact search at 100,000 memories, 400 gives 0.96.
    "ef_search": env.int("LOREKEEPER_SEARCH_EF", default=400),
    # Up to this many vectors in scope KNN is an exact scan: faster there than a filtered HNSW walk, and exact.
    "exact_max": env.int("LOREKEEPER_SEARCH_EXACT_MAX", default=20000),
    # ... and so is a scope that is less than this share of the whole table (a filtered HNSW walk there is slower).
    "hnsw_min_share": env.float("LOREKEEPER_SEARCH_HNSW_MIN_SHARE", default=0.1),
    # A user with this many vectors of one dimension gets an HNSW index of their own (apps/memories/services/
    # own_indexes.py), searched whatever their share of the table; dropped under half of it.
    "own_index_min": env.int("LOREKEEPER_SEARCH_OWN_INDEX_MIN", default=50000),
    # Text search over a scope of this many rows or more estimates word frequencies from that many rows, and ranks
    # only the rows holding the query's rarest words, estimated to fill about `text_budget` rows.
    "text_sample": env.int("LOREKEEPER_SEARCH_TEXT_SAMPLE", default=1000),
    "text_budget": env.int("LOREKEEPER_SEARCH_TEXT_BUDGET", default=2000),
    # Share of its best neighbour's relevance a chat turn gains (answers follow questions).
    "neighbours": env.float("LOREKEEPER_SEARCH_NEIGHBOURS", default=0.5),
    # How the two rankings make relevance: "score", the weighted mean of words and meaning (docs/SEARCH.md), or
    # "rank", reciprocal rank fusion with `rrf_k` (as before; weights 0.4 and 1.0 there). bench/locomo_recall.py
    # measures the choice and the weights.
    "fusion": {
        "method": env.str("LOREKEEPER_SEARCH_FUSION", default="score"),
        "vector": env.float("LOREKEEPER_SEARCH_FUSION_VECTOR", default=1.0),
        "text": env.float("LOREKEEPER_SEARCH_FUSION_TEXT", default=1.0),
    },
    "rrf_k": 60,
}
