#include "mpi/agreement.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <vector>

#include "gradagg/errors.h"
#include "mpi/deadline.h"
#include "mpi/mpi_error.h"
#include "mpi/roll_call.h"

namespace gradagg {

std::string AgreeOnProblem(MPI_Comm comm, const std::string& localProblem) {
  int rank = 0;
  GRADAGG_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  const int candidate = localProblem.empty() ? INT_MAX : rank;
  int reporter = INT_MAX;
  GRADAGG_MPI_CHECK(MPI_Allreduce(&candidate, &reporter, 1, MPI_INT, MPI_MIN, comm));
  if (reporter == INT_MAX) return "";

  const std::string text = rank == reporter ? localProblem + " (reported by " + RankAndHost() + ")" : std::string();
  int length = static_cast<int>(text.size());
  GRADAGG_MPI_CHECK(MPI_Bcast(&length, 1, MPI_INT, reporter, comm));
  std::vector<char> buffer(text.begin(), text.end());
  buffer.resize(static_cast<size_t>(length));
  GRADAGG_MPI_CHECK(MPI_Bcast(buffer.data(), length, MPI_CHAR, reporter, comm));
  return std::string(buffer.begin(), buffer.end());
}

std::vector<std::string> AllGatherText(MPI_Comm comm, const std::string& mine) {
  int size = 0;
  GRADAGG_MPI_CHECK(MPI_Comm_size(comm, &size));
  const int length = static_cast<int>(mine.size());
  std::vector<int> lengths(static_cast<size_t>(size)), offsets(static_cast<size_t>(size));
  GRADAGG_MPI_CHECK(MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm));
  int total = 0;
  for (int r = 0; r < size; ++r) offsets[static_cast<size_t>(r)] = total, total += lengths[static_cast<size_t>(r)];
  std::vector<char> all(static_cast<size_t>(std::max(total, 1)));
  GRADAGG_MPI_CHECK(
      MPI_Allgatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, comm));
  std::vector<std::string> texts;
  for (int r = 0; r < size; ++r)
    texts.emplace_back(all.data() + offsets[static_cast<size_t>(r)],
                       static_cast<size_t>(lengths[static_cast<size_t>(r)]));
  return texts;
}

std::string AgreeOnSettings(MPI_Comm comm, const std::vector<NamedSetting>& settings) {
  // One line for where this rank runs, then a name and a value a line (names and values hold no newline here).
  std::string mine = RankAndHost() + "\n";
  for (const NamedSetting& setting : settings) mine += setting.name + "\n" + setting.value + "\n";
  const std::vector<std::string> texts = AllGatherText(comm, mine);
  const auto lines = [](const std::string& text) {
    std::vector<std::string> split;
    size_t begin = 0;
    for (size_t end = text.find('\n'); end != std::string::npos; begin = end + 1, end = text.find('\n', begin))
      split.push_back(text.substr(begin, end - begin));
    return split;
  };
  const std::vector<std::string> first = lines(texts[0]);
  for (size_t r = 1; r < texts.size(); ++r) {
    const std::vector<std::string> theirs = lines(texts[r]);
    for (size_t i = 1; i < std::max(first.size(), theirs.size()); i += 2) {
      const bool inFirst = i + 1 < first.size(), inTheirs = i + 1 < theirs.size();
      if (!inFirst || !inTheirs || first[i] != theirs[i]) {
        return "the settings differ: " + theirs[0] + " has " + (inTheirs ? theirs[i] : "none") + " where " + first[0] +
               " has " + (inFirst ? first[i] : "none");
      }
      if (first[i + 1] != theirs[i + 1])
        return first[i] + " is " + theirs[i + 1] + " on " + theirs[0] + " but " + first[i + 1] + " on " + first[0];
    }
  }
  return "";
}

size_t SumOver(MPI_Comm comm, size_t count) {
  unsigned long long mine = count;
  unsigned long long sum = 0;
  GRADAGG_MPI_CHECK(MPI_Allreduce(&mine, &sum, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, comm));
  return static_cast<size_t>(sum);
}

std::vector<char> AllGatherBytes(MPI_Comm comm, const std::vector<char>& mine) {
  int size = 0;
  GRADAGG_MPI_CHECK(MPI_Comm_size(comm, &size));
  std::vector<char> all(mine.size() * size);
  GRADAGG_MPI_CHECK(MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_BYTE, all.data(),
                                  static_cast<int>(mine.size()), MPI_BYTE, comm));
  return all;
}

bool AllGatherBytesBefore(MPI_Comm comm, const std::vector<char>& mine, double seconds, std::vector<char>& all,
                          std::vector<int>& absent) {
  int size = 0;
  GRADAGG_MPI_CHECK(MPI_Comm_size(comm, &size));
  // On the heap: a gather that timed out may still complete when the missing rank comes, so its buffers are left
  // to it rather than freed under it.
  auto* buffers = new std::vector<char>(mine.size() * (static_cast<size_t>(size) + 1));
  std::copy(mine.begin(), mine.end(), buffers->begin());
  char* gathered = buffers->data() + mine.size();
  std::vector<MPI_Request> request(1, MPI_REQUEST_NULL);
  GRADAGG_MPI_CHECK(MPI_Iallgather(buffers->data(), static_cast<int>(mine.size()), MPI_BYTE, gathered,
                                   static_cast<int>(mine.size()), MPI_BYTE, comm, request.data()));
  if (!WaitAllBefore(Deadline(seconds), request)) {
    absent = AbsentRanks(comm, std::min(seconds / 2.0, 10.0));
    return false;
  }
  all.assign(gathered, gathered + mine.size() * static_cast<size_t>(size));
  delete buffers;
  return true;
}

std::vector<char> AllGatherBytesWithin(MPI_Comm comm, const std::vector<char>& mine, double seconds,
                                       const std::string& what) {
  std::vector<char> all;
  std::vector<int> absent;
  if (AllGatherBytesBefore(comm, mine, seconds, all, absent)) return all;
  throw TimeoutError(what + " waited " + std::to_string(static_cast<int>(seconds)) + " s for " +
                     (absent.empty() ? std::string("ranks that came too late") : DescribeWorldRanks(comm, absent)) +
                     ", which never came (seen by " + RankAndHost() + ")");
}

}  // namespace gradagg
