"""REST API for characters, chats and messages (one APIView per resource and operation set)."""
