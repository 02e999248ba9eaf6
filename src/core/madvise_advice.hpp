// The madvise(2) advice values newer than older C libraries' headers: the kernel answers EINVAL
// where it does not know them, which the writers and the node's shared memory treat as "not here".
#pragma once

#include <sys/mman.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif
