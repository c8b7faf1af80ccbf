from django.db import migrations
from pgvector.django import VectorExtension


class Migration(migrations.Migration):
    """pgvector, for the memory store's embeddings (HNSW cosine indexes)."""

    dependencies = []
    operations = [VectorExtension()]
