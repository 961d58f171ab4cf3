// Package restmapper is handroll's RESTMapper: it turns a kind (apps/v1
// Deployment) into the resource to call (deployments, namespaced) and back,
// from what the API server's discovery says, implementing meta.RESTMapper.
//
// Manager piece replaced: apiutil.NewDynamicRESTMapper, the mapper behind
// controller-runtime's Manager.GetRESTMapper (and its client, which maps
// every object it reads or writes).
//
// How it fetches, and why:
//
//   - Nothing at start. The first lookup asks for the server's group list
//     (ServerGroups: two small requests, /api and /apis), then only the
//     resources of the group-version it needs (ServerResourcesForGroupVersion:
//     one request). An operator that touches four kinds never downloads the
//     resources of the forty other groups a cluster serves. A
//     *discovery.DiscoveryClient is switched to the plain (legacy) group
//     list, because the aggregated one carries every resource of every group.
//   - A miss refreshes. A lookup that finds nothing asks discovery again about
//     that group (the group list and the group's versions it used) and looks
//     once more, so a CRD installed after start is found without a restart.
//   - Refreshes are rate-limited (Options.RefreshLimiter, 5 per second with a
//     burst of 5 by default): a loop asking for a kind that does not exist
//     gets a quick no-match, not a discovery storm. First fetches are not
//     limited: without them there is nothing to answer from.
//   - Data ages. Fetched data older than Options.MaxAge (10 minutes by
//     default) is fetched again, rate-limited, by the next lookup that uses
//     it, so a deleted CRD's kind stops mapping: a group-version the server
//     answers 404 for, or no longer lists, is dropped. Reset forgets
//     everything at once.
//   - Safe for concurrent use: lookups read under a read lock; no lock is held
//     during a request; concurrent fetches of the same thing (or refreshes of
//     the same group) collapse into one, the others wait for its result.
//
// Differences from the mappers client-go builds (restmapper.NewDiscoveryRESTMapper
// over meta.DefaultRESTMapper), which controller-runtime's also uses:
//
//   - An empty group means the core group, never "any group": searching every
//     group for a bare resource name ("deployments") is kubectl's shorthand
//     and would need the discovery of every group, which this mapper avoids.
//     For the same reason a partial group ("apps" for "apps.example.com")
//     is not expanded. ResourceSingularizer, whose argument has no group at
//     all, searches what is already fetched, then the core group.
//   - Resource names match the plural, the singular and the short names
//     (kubectl's "wa" finds webapps); kinds match exactly, and the guessed
//     "<Kind>List" kinds are not mapped.
package restmapper
