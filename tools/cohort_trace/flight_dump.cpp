#include "cohort_trace/flight_dump.hpp"

#include <cohort/error.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <system_error>

namespace cohort::trace {
namespace {

using nlohmann::json;

constexpr std::string_view kFormatName = "cohort-flight-record";
constexpr int kFormatVersion = 1;

[[noreturn]] void malformed(const std::string& source, const std::string& what) {
  throw Error(ErrorCode::InvalidArgument, source + ": not a cohort flight record: " + what);
}

// Field access that names the field when it is missing or has the wrong type.
class Fields {
 public:
  Fields(const json& object, const std::string& source, std::string where)
      : object_(object), source_(source), where_(std::move(where)) {
    if (!object_.is_object()) malformed(source_, where_ + " is not an object");
  }

  template <class T>
  T get(const char* name) const {
    const json& value = find(name);
    try {
      return value.get<T>();
    } catch (const json::exception&) {
      malformed(source_, field(name) + " has the wrong type");
    }
  }

  /// nullopt when the field is null (or absent).
  template <class T>
  std::optional<T> optional(const char* name) const {
    const auto it = object_.find(name);
    if (it == object_.end() || it->is_null()) return std::nullopt;
    try {
      return it->get<T>();
    } catch (const json::exception&) {
      malformed(source_, field(name) + " has the wrong type");
    }
  }

  const json& find(const char* name) const {
    const auto it = object_.find(name);
    if (it == object_.end()) malformed(source_, field(name) + " is missing");
    return *it;
  }

 private:
  std::string field(const char* name) const { return "field '" + where_ + name + "'"; }

  const json& object_;
  const std::string& source_;
  std::string where_;
};

OpState parse_state(const std::string& text, const std::string& source) {
  if (text == "queued") return OpState::Queued;
  if (text == "started") return OpState::Started;
  if (text == "done") return OpState::Done;
  if (text == "failed") return OpState::Failed;
  malformed(source, "unknown op state '" + text + "'");
}

RecordedOp parse_op(const json& value, const std::string& source, std::size_t index) {
  const Fields f(value, source, "ops[" + std::to_string(index) + "].");
  RecordedOp op;
  op.seq = f.get<std::uint32_t>("seq");
  op.op = f.get<std::string>("op");
  op.dtype = f.optional<std::string>("dtype");
  op.reduce_op = f.optional<std::string>("reduce_op");
  op.count = f.get<std::uint64_t>("count");
  op.root = f.optional<int>("root");
  op.algorithm = f.optional<std::string>("algorithm");
  op.state = parse_state(f.get<std::string>("state"), source);
  op.timeout_ms = f.get<std::int64_t>("timeout_ms");
  op.queued_us = f.optional<std::int64_t>("queued_us");
  op.started_us = f.optional<std::int64_t>("started_us");
  op.finished_us = f.optional<std::int64_t>("finished_us");
  op.awaited_peers = f.optional<std::vector<int>>("awaited_peers").value_or(std::vector<int>{});
  return op;
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::SystemError, path.string() + ": cannot be opened");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error(ErrorCode::SystemError, path.string() + ": cannot be read");
  return text.str();
}

bool is_dump_name(const std::filesystem::path& path) {
  const std::string name = path.filename().string();
  return name.rfind("cohort-trace.", 0) == 0 && name.size() > 5 &&
         name.compare(name.size() - 5, 5, ".json") == 0;
}

}  // namespace

std::string_view state_name(OpState state) noexcept {
  switch (state) {
    case OpState::Queued: return "queued";
    case OpState::Started: return "started";
    case OpState::Done: return "done";
    case OpState::Failed: return "failed";
  }
  return "queued";
}

RankDump parse_dump(std::string_view text, const std::string& source) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    malformed(source, std::string("invalid JSON: ") + e.what());
  }
  const Fields f(doc, source, "");
  if (f.get<std::string>("format") != kFormatName)
    malformed(source, "format is not " + std::string(kFormatName));
  if (const int version = f.get<int>("version"); version != kFormatVersion)
    malformed(source, "version " + std::to_string(version) + " (this reader knows 1)");

  RankDump dump;
  dump.source = source;
  dump.job = f.get<std::string>("job");
  dump.pid = f.get<long>("pid");
  dump.host = f.get<std::string>("host");
  dump.communicator = f.get<std::uint32_t>("communicator");
  dump.rank = f.get<int>("rank");
  dump.size = f.get<int>("size");
  if (dump.size < 1 || dump.rank < 0 || dump.rank >= dump.size)
    malformed(source,
              "rank " + std::to_string(dump.rank) + " of size " + std::to_string(dump.size));
  dump.reason = f.get<std::string>("reason");
  dump.dumped_at_us = f.get<std::int64_t>("dumped_at_us");
  dump.capacity = f.get<std::uint64_t>("capacity");
  dump.recorded = f.get<std::uint64_t>("recorded");
  if (const json& failure = f.find("failure"); !failure.is_null()) {
    const Fields ff(failure, source, "failure.");
    RecordedFailure rf;
    rf.code = ff.get<std::string>("code");
    rf.message = ff.get<std::string>("message");
    rf.op = ff.get<std::string>("op");
    rf.name = ff.optional<std::string>("name").value_or(rf.op);
    rf.sequence = ff.optional<std::uint32_t>("sequence");
    rf.peers = ff.optional<std::vector<int>>("peers").value_or(std::vector<int>{});
    dump.failure = std::move(rf);
  }
  const json& ops = f.find("ops");
  if (!ops.is_array()) malformed(source, "field 'ops' is not an array");
  dump.ops.reserve(ops.size());
  for (std::size_t i = 0; i < ops.size(); ++i) dump.ops.push_back(parse_op(ops[i], source, i));
  return dump;
}

std::vector<RankDump> read_dumps(const std::vector<std::filesystem::path>& paths,
                                 std::vector<std::string>& problems,
                                 std::optional<std::filesystem::file_time_type> newer_than) {
  std::vector<std::filesystem::path> files;
  for (const std::filesystem::path& path : paths) {
    std::error_code ec;
    if (!std::filesystem::is_directory(path, ec)) {
      files.push_back(path);
      continue;
    }
    for (const auto& entry : std::filesystem::directory_iterator(path, ec))
      if (entry.is_regular_file(ec) && is_dump_name(entry.path())) files.push_back(entry.path());
    if (ec) problems.push_back(path.string() + ": cannot be listed: " + ec.message());
  }
  std::sort(files.begin(), files.end());
  std::vector<RankDump> dumps;
  for (const std::filesystem::path& file : files) {
    try {
      if (newer_than) {
        std::error_code ec;
        const auto written = std::filesystem::last_write_time(file, ec);
        if (!ec && written < *newer_than) continue;
      }
      dumps.push_back(parse_dump(read_text(file), file.string()));
    } catch (const Error& e) {
      problems.push_back(e.message());
    }
  }
  return dumps;
}

}  // namespace cohort::trace
