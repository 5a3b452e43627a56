#define VAL 4.0f
