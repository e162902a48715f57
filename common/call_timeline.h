// Host timestamps of one call's steps, to see where a call's fixed cost goes (GRADAGG_TRACE=3 prints them). Any layer
// marks its steps; a mark costs one branch unless the calling thread is recording.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace gradagg::call_timeline {

struct Mark {
  const char* step;  // a string literal
  int peer;          // the rank the step concerns, or -1
  std::chrono::steady_clock::time_point at;
};

struct Recording {
  bool on = false;
  std::vector<Mark> marks;
};

inline Recording& ThisThread() {
  thread_local Recording recording;
  return recording;
}

// Starts recording this thread's marks (clearing any earlier ones).
inline void Begin() {
  Recording& recording = ThisThread();
  recording.marks.clear();
  recording.on = true;
  recording.marks.push_back({"start", -1, std::chrono::steady_clock::now()});
}

inline void Note(const char* step, int peer = -1) {
  Recording& recording = ThisThread();
  if (recording.on) recording.marks.push_back({step, peer, std::chrono::steady_clock::now()});
}

// Stops recording; returns the marks as "step[peer] +microseconds since the previous mark", space-separated.
inline std::string End() {
  Recording& recording = ThisThread();
  recording.on = false;
  std::string text;
  for (size_t i = 1; i < recording.marks.size(); ++i) {
    const Mark& mark = recording.marks[i];
    const double micros = std::chrono::duration<double, std::micro>(mark.at - recording.marks[i - 1].at).count();
    char item[96];
    if (mark.peer >= 0) {
      std::snprintf(item, sizeof item, "%s%s[%d] +%.1f", text.empty() ? "" : " ", mark.step, mark.peer, micros);
    } else {
      std::snprintf(item, sizeof item, "%s%s +%.1f", text.empty() ? "" : " ", mark.step, micros);
    }
    text += item;
  }
  return text;
}

}  // namespace gradagg::call_timeline
