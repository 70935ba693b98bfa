// The archive packer's last step: the groups' records merged into one namespace, the
// partitions finished under their final ids, the manifest filled.
// Thread-safety: called once, after every group's Run has returned.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "meta/archive_group.h"
#include "meta/manifest.h"

namespace fanstore::meta::archive_pack {

// Merges the groups' records in source order, as tar x of the sources one after another
// would: a later member replaces an earlier one of the same name, directories merge.
// Then places every member and directory as the tree packer does, finishes the
// partitions (relabelled and renamed to their final ids) and fills the manifest.
Result<PackStats> Merge(std::vector<std::unique_ptr<GroupPacker>>& groups,
                        const std::vector<Group>& plan, const PackOptions& o,
                        const std::string& tmp, const std::string& salt, Manifest& manifest);

}  // namespace fanstore::meta::archive_pack
