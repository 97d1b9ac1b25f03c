/* early: frees the block early_lib's constructor allocated. */
#include <stdlib.h>

extern void *early_kept;

int main(void)
{
	free(early_kept);
	return 0;
}
