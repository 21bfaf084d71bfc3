"""actorlog: durable async actors on a checksummed write-ahead log."""
