package node

// openEngine opens the storage engine under cfg.DataDir. This build has no
// engine: a node needs Config.Storage.
func openEngine(Config) (Storage, error) { return nil, ErrStorageUnavailable }
