package grammar

// NoMaskCache turns g's cache of whole masks off (transitions between its
// states are still learnt): what a mask costs when its state's mask is not
// cached.
func NoMaskCache(g *Grammar) {
	g.cache.noMasks = true
	g.cache.cur.Store(g.cache.newSet())
}
