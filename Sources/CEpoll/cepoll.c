/* Everything is inline in include/cepoll.h; SwiftPM wants a source file for a C target. */
#include "cepoll.h"
