// libgradagg.so's one translation unit of its own: the library is libgradagg.a linked whole (aggregator/
// CMakeLists.txt), and CMake wants a shared library to list at least one source.
#include "gradagg/aggregator.h"
