// Where a dataset may be mounted when the user did not say (--mount): the manifest's
// `source`, the path it was packed from, only if the user could have made that directory
// and mounting there hides nothing the job runs on. A dataset made by someone else must not
// choose a system location (mounted over Python's dist-packages, its files would run as
// code in every Python started under fanrun; over /etc, it would hide the real one).
// Thread-safety: pure functions (DefaultMountRefusal reads the file system and $HOME).
#pragma once

#include <string>

namespace fanstore::fanrun {

// Why an absolute, normalised path is no place for a dataset by default: "a system
// directory" (/, or at or below /usr, /etc, /bin, /sbin, /lib*, /boot, /proc, /sys, /dev,
// /run, /var, /opt, /srv, /snap; /dev/shm, /run/user and /var/tmp below them are fine),
// "a hidden directory" (a component starting with '.': ~/.local, ~/.config, ~/.ssh),
// "a Python package directory" (site-packages, dist-packages); "" when none applies.
std::string SystemPathReason(const std::string& path);

// Why `source` (the manifest's) is refused as the default mount point, as one line for
// "fanrun: ..." that ends by asking for --mount; "" when it may be used. Besides
// SystemPathReason (of the path as spelled and as its existing part resolves), it must not
// be or contain the working directory or $HOME, and the user must be able to have made it:
// the user owns it, or (when it does not exist) its nearest existing ancestor, or that
// ancestor is a sticky directory anyone may create in (/tmp).
std::string DefaultMountRefusal(const std::string& source);

}  // namespace fanstore::fanrun
