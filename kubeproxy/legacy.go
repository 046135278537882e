package kubeproxy

var legacyJumps = currentJumps

func (g *Generator) writeLegacy() {}
