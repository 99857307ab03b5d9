/* Train the digits MLP from C through two libraries built by tracec build:
 * libstep.so (model.py:train_step) and libpredict.so (model.py:predict).
 *
 * Every buffer is allocated by walking the libraries' argument tables, so
 * nothing here hard-codes the model: the step starts from the initial state
 * embedded in its library (train_step_init_state_argv), the loss printed
 * per epoch falls, and the inference library then reads the trained
 * parameters straight from the step's buffers, matched by Python name.
 *
 * Usage: train DATA_DIR [EPOCHS]   (DATA_DIR as written by make_data.py)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libpredict.h"
#include "libstep.h"

static void *read_rows(const char *dir, const char *name, size_t row_bytes, int64_t *n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.bin", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f || fread(n, sizeof *n, 1, f) != 1) {
        fprintf(stderr, "cannot read %s (run make_data.py)\n", path);
        exit(2);
    }
    void *rows = malloc((size_t)*n * row_bytes);
    if (!rows || fread(rows, row_bytes, (size_t)*n, f) != (size_t)*n) {
        fprintf(stderr, "%s is truncated\n", path);
        exit(2);
    }
    fclose(f);
    return rows;
}

static size_t nbytes(const tracec_arg *a) { return (size_t)a->numel * (size_t)a->itemsize; }

static int find(const tracec_arg *table, int n, const char *source) {
    for (int i = 0; i < n; i++)
        if (strcmp(table[i].source, source) == 0) return i;
    fprintf(stderr, "no argument %s\n", source);
    exit(3);
}

static void check(int rc, const char *(*message)(int)) {
    if (rc) {
        fprintf(stderr, "error %d: %s\n", rc, message(rc));
        exit(4);
    }
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s DATA_DIR [EPOCHS]\n", argv[0]);
        return 1;
    }
    int epochs = argc > 2 ? atoi(argv[2]) : 8;
    printf("step library built for %s\n", train_step_target);
    check(train_step_check_cpu(), train_step_error_message);

    /* The step's buffers, one per table entry, then its initial state. */
    void *step[TRAIN_STEP_NUM_ARGS];
    for (int i = 0; i < TRAIN_STEP_NUM_ARGS; i++) {
        step[i] = calloc(1, nbytes(&train_step_args[i]) + 1);
        if (!step[i]) return 5;
    }
    check(train_step_init_state_argv(step), train_step_error_message);
    int ix = find(train_step_args, TRAIN_STEP_NUM_ARGS, "x");
    int iy = find(train_step_args, TRAIN_STEP_NUM_ARGS, "y");
    int iloss = find(train_step_args, TRAIN_STEP_NUM_ARGS, "out");
    int64_t batch = train_step_args[ix].shape[0], features = train_step_args[ix].shape[1];

    int64_t n_train, n_test, n_check;
    float *train_x = read_rows(argv[1], "train_x", features * sizeof(float), &n_train);
    int64_t *train_y = read_rows(argv[1], "train_y", sizeof(int64_t), &n_check);
    float *test_x = read_rows(argv[1], "test_x", features * sizeof(float), &n_test);
    int64_t *test_y = read_rows(argv[1], "test_y", sizeof(int64_t), &n_check);

    /* Shuffled mini-batches (a fixed-seed LCG), the loss averaged per epoch. */
    int64_t *perm = malloc(n_train * sizeof *perm);
    for (int64_t i = 0; i < n_train; i++) perm[i] = i;
    uint64_t rng = 12345;
    float *x = step[ix];
    int64_t *y = step[iy];
    for (int epoch = 1; epoch <= epochs; epoch++) {
        for (int64_t i = n_train - 1; i > 0; i--) {
            rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
            int64_t j = (int64_t)((rng >> 33) % (uint64_t)(i + 1)), t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        double total = 0;
        int steps = 0;
        for (int64_t b = 0; b + batch <= n_train; b += batch) {
            for (int64_t r = 0; r < batch; r++) {
                memcpy(x + r * features, train_x + perm[b + r] * features,
                       features * sizeof(float));
                y[r] = train_y[perm[b + r]];
            }
            check(train_step_argv(step), train_step_error_message);
            total += *(float *)step[iloss];
            steps++;
        }
        printf("epoch %d loss %.4f\n", epoch, total / steps);
    }

    /* Inference: the predict library's parameters are the step's buffers. */
    void *pred[PREDICT_NUM_ARGS];
    for (int i = 0; i < PREDICT_NUM_ARGS; i++) {
        const tracec_arg *a = &predict_args[i];
        if (a->role == TRACEC_ROLE_PARAMETER || a->role == TRACEC_ROLE_BUFFER) {
            int k = find(train_step_args, TRAIN_STEP_NUM_ARGS, a->source);
            if (nbytes(&train_step_args[k]) != nbytes(a)) return 6;
            pred[i] = step[k];
        } else {
            pred[i] = calloc(1, nbytes(a) + 1);
        }
    }
    int px = find(predict_args, PREDICT_NUM_ARGS, "x");
    int pout = find(predict_args, PREDICT_NUM_ARGS, "out");
    int64_t eval_batch = predict_args[px].shape[0];
    int64_t correct = 0;
    for (int64_t b = 0; b < n_test; b += eval_batch) {
        int64_t rows = n_test - b < eval_batch ? n_test - b : eval_batch;
        memset(pred[px], 0, nbytes(&predict_args[px]));
        memcpy(pred[px], test_x + b * features, rows * features * sizeof(float));
        check(predict_argv(pred), predict_error_message);
        for (int64_t r = 0; r < rows; r++)
            correct += ((int64_t *)pred[pout])[r] == test_y[b + r];
    }
    printf("test accuracy %.4f (%lld of %lld)\n", (double)correct / n_test,
           (long long)correct, (long long)n_test);
    return 0;
}
