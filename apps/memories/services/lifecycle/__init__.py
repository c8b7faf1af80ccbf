"""What keeps a memory store true over months: classification of every candidate (dedup, supersession,
contradiction), confidence decay, per-kind consolidation, and the daily→weekly→monthly→yearly hierarchy."""
