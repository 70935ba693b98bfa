// fanstore: pack a dataset tree into partitions, and inspect, read and verify packed data.
#include <CLI/CLI.hpp>

#include "bin/cli_util.h"
#include "bin/fanstore_commands.h"
#include "meta/format.h"

namespace {
const std::string kPathHelp =
    "Member path: relative to the dataset root, with or without a leading '/', or the "
    "absolute path it had when packed (under the manifest's source)";
}  // namespace

int main(int argc, char** argv) {
  using namespace fanstore;
  CLI::App app{
      "fanstore: pack a training dataset into a few large partition blobs, and "
      "list, read and verify a packed dataset."};
  app.set_version_flag("--version", std::string("fanstore ") + FANSTORE_VERSION);
  app.require_subcommand(1);

  meta::PackOptions po;
  std::string compress = "auto";
  bool quiet = false;
  std::vector<std::string> pack_args;
  auto* pack = app.add_subcommand(
      "pack",
      "Pack SRC... into the dataset directory OUT. A SRC is a directory, a tar archive "
      "(plain, .gz, .zst or .xz, known by its first bytes) or a zip archive; archives are "
      "read once, straight into the partitions, with nothing extracted. Brace ranges and "
      "globs are expanded: 'shards/train-{000000..000146}.tar'");
  // (one positional for both: the last argument is OUT; CLI11 names may hold no space)
  pack->add_option("SRC", pack_args,
                   "SRC... OUT: the sources, then the output directory (manifest + "
                   "part-NNNNN.fsb). One directory's absolute path (an archive's, without "
                   ".tar...) becomes the default mount point")
      ->required()
      ->expected(2, -1)
      ->type_name("PATH");
  pack->add_option("--prefix", po.prefix,
                   "Put the sources' members under this directory of the namespace");
  pack->add_flag("--untar-nested", po.untar_nested,
                 "A member X.tar (.tar.gz, .tgz, .tar.zst, .tar.xz) of an archive becomes the "
                 "directory X with its members (ImageNet's class tars)");
  pack->add_flag("--keep-shard-dirs", po.keep_shard_dirs,
                 "Each archive's members under a directory named after it (default: all "
                 "merged into one namespace, a later member of a name replacing an earlier)");
  pack->add_option("--partitions,-p", po.partitions,
                   "Number of sharded partitions (default: one per 256 MiB of data, at least 1)")
      ->check(CLI::Validator(cli::IntegerIn(1, meta::kMaxShardedPartitions),
                             "1.." + std::to_string(meta::kMaxShardedPartitions)));
  pack->add_option("--broadcast,-b", po.broadcast,
                   "Glob of members every node keeps, e.g. 'val/**' (repeatable)");
  pack->add_option(
          "--compress,-c", compress,
          "none | auto | 0..3 (ISA-L level); auto keeps a member deflated (level 1) "
          "only if that saves >= 12.5%, never tries JPEG/PNG/MP4/zip..., and keeps members "
          "over 8 MiB raw unless named as text (.txt .csv .json ...: a mapped "
          "compressed member is inflated whole); large members are deflated in "
          "1 MiB blocks, so a read inflates only what it touches")
      ->capture_default_str();
  pack->add_option("--threads,-t", po.threads, "Worker threads (default: all cores)")
      ->check(CLI::Validator(cli::IntegerIn(1, 1024u), "1..1024"));
  pack->add_flag("--force,-f", po.force, "Replace OUT if it is an existing dataset");
  pack->add_flag("--public", po.public_output,
                 "Make OUT readable by everyone even when some members are not (their bytes "
                 "are then readable by anyone who can read OUT; default: such a tree makes OUT "
                 "readable by you only)");
  pack->add_flag("--quiet,-q", quiet, "No progress bar and no summary line");

  std::string data, path = "/";
  bool long_format = false, recursive = false, json = false;
  auto* ls = app.add_subcommand("ls", "List a directory (or show a file) of a packed dataset");
  ls->add_option("DATA", data, "Packed dataset directory")->required();
  ls->add_option("PATH", path, kPathHelp + " (default: the root)");
  ls->add_flag("-l,--long", long_format, "Mode, owner, size, modification time, symlink target");
  ls->add_flag("-R,--recursive", recursive, "List subdirectories recursively");

  auto* stat = app.add_subcommand("stat", "Show one member's metadata and where it is stored");
  stat->add_option("DATA", data, "Packed dataset directory")->required();
  stat->add_option("PATH", path, kPathHelp)->required();

  auto* cat = app.add_subcommand("cat", "Write a member's bytes to standard output");
  cat->add_option("DATA", data, "Packed dataset directory")->required();
  cat->add_option("PATH", path, kPathHelp)->required();

  auto* verify = app.add_subcommand("verify", "Check every checksum; exit 0 only if all is intact");
  verify->add_option("DATA", data, "Packed dataset directory")->required();
  verify->add_flag("--quiet,-q", quiet, "Only errors and the summary line");

  auto* info = app.add_subcommand("info", "Show the dataset's totals and partitions");
  info->add_option("DATA", data, "Packed dataset directory")->required();
  info->add_flag("--json", json, "Machine-readable output");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    cli::Error("fanstore", std::string(e.what()) + " (see fanstore --help)");
    return cli::kExitUsage;
  }

  if (pack->parsed()) {
    auto mode = meta::CompressMode::Parse(compress);
    if (!mode.ok()) {
      cli::Error("fanstore", mode.status().message());
      return cli::kExitUsage;
    }
    po.compress = *mode;
    po.out = pack_args.back();
    pack_args.pop_back();
    po.sources = pack_args;  // (one directory goes to the tree packer)
    return tool::Pack(po, quiet);
  }
  if (ls->parsed()) return tool::Ls(data, path, long_format, recursive);
  if (stat->parsed()) return tool::Stat(data, path);
  if (cat->parsed()) return tool::Cat(data, path);
  if (verify->parsed()) return tool::Verify(data, quiet);
  if (info->parsed()) return tool::Info(data, json);
  return cli::kExitUsage;
}
