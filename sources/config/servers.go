package config

import "slices"

// ByServer groups ps by the MySQL block each uses (MySQLFor), in file
// order: pipelines that read, write and keep their binlog on the same
// servers are checked together (opctl doctor, schema check and apply).
func (c *Config) ByServer(ps []*Pipeline) [][]*Pipeline {
	var groups [][]*Pipeline
	var keys []MySQL
	for _, p := range ps {
		m := c.MySQLFor(p)
		i := slices.Index(keys, m)
		if i < 0 {
			keys, groups = append(keys, m), append(groups, nil)
			i = len(groups) - 1
		}
		groups[i] = append(groups[i], p)
	}
	return groups
}

// ForServer is the configuration as the pipelines of one group of
// ByServer see it: the top-level mysql block replaced by theirs.
func (c *Config) ForServer(group []*Pipeline) *Config {
	g := *c
	g.MySQL = c.MySQLFor(group[0])
	return &g
}
