/*
 * map_internal.h - internal to the engine: memory for the order path's
 * rings and staging FIFO.
 */
#ifndef HOURGLASS_MAP_INTERNAL_H
#define HOURGLASS_MAP_INTERNAL_H

#include <stddef.h>

/*
 * len bytes of zeroed anonymous memory with every page backed before this
 * returns (MAP_POPULATE), so the order path never takes a page fault in its
 * first lap through it; NULL if the mapping fails. Release with
 * munmap(p, len). Any thread.
 */
void *hg_map__populated(size_t len);

#endif /* HOURGLASS_MAP_INTERNAL_H */
