"""Building shards: the archive writer, packed descriptors, provenance sidecars, the runtime check, publishing and the depfile; ``pack`` runs them."""
