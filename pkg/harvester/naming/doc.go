// Package naming holds the names and labels of what the provider makes on Harvester for a
// guest cluster: the Guest (namespace, name and owner mark of a cluster), the labels that say
// whose an object is, and bounded, hashed names that stay valid DNS labels.
package naming
