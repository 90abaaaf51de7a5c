#define _GNU_SOURCE
#include "mosquitto_io.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The patch reads the ELF64 dynamic section of a shared libmosquitto through glibc's dl_iterate_phdr: Linux,
 * glibc, x86-64 or arm64 only. Elsewhere, or built with MOSQUITTO_IO_DISABLED (the package trait
 * `UnbufferedIO`), this module still builds, installs nothing (reason 5), and the client reads unbuffered. */
#if defined(__linux__) && defined(__GLIBC__) && (defined(__x86_64__) || defined(__aarch64__)) && \
    !defined(MOSQUITTO_IO_DISABLED)
#define MOSQUITTO_IO_PATCHES 1
#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#else
#define MOSQUITTO_IO_PATCHES 0
#endif

struct mosquitto_io_buffer {
    int fd;
    unsigned char *data;
    size_t capacity;
    size_t start;
    size_t end;
    mosquitto_io_counters counters;
};

/* The buffer this thread's reads go through; only the thread itself reads or sets it. */
static __thread mosquitto_io_buffer *entered;
/* Set while this thread has libmosquitto queue a packet; wake-up bytes skipped meanwhile, on this thread. */
static __thread int queueing;
static __thread uint64_t queueing_skips;

mosquitto_io_buffer *mosquitto_io_buffer_create(size_t capacity) {
    if (capacity < 4096) capacity = 4096;
    mosquitto_io_buffer *buffer = calloc(1, sizeof *buffer);
    if (buffer == NULL) return NULL;
    buffer->data = malloc(capacity);
    if (buffer->data == NULL) {
        free(buffer);
        return NULL;
    }
    buffer->capacity = capacity;
    buffer->fd = -1;
    return buffer;
}

void mosquitto_io_buffer_destroy(mosquitto_io_buffer *buffer) {
    if (buffer == NULL) return;
    /* Only this thread's routing can be cleared here; a thread that enters restores its routing when done. */
    if (entered == buffer) entered = NULL;
    free(buffer->data);
    free(buffer);
}

void mosquitto_io_buffer_reset(mosquitto_io_buffer *buffer, int fd) {
    buffer->fd = fd;
    buffer->start = 0;
    buffer->end = 0;
}

size_t mosquitto_io_buffer_pending(const mosquitto_io_buffer *buffer) { return buffer->end - buffer->start; }

mosquitto_io_counters mosquitto_io_buffer_counters(const mosquitto_io_buffer *buffer) { return buffer->counters; }

mosquitto_io_buffer *mosquitto_io_enter(mosquitto_io_buffer *buffer) {
    mosquitto_io_buffer *before = entered;
    entered = buffer;
    return before;
}

ssize_t mosquitto_io_read(int fd, void *destination, size_t count) {
    mosquitto_io_buffer *buffer = entered;
    if (buffer == NULL || fd < 0 || fd != buffer->fd) return read(fd, destination, count);
    /* libmosquitto never asks for nothing; were it to, a read into the buffer would return 0, its end of stream. */
    if (count == 0) return 0;
    buffer->counters.requested_reads += 1;
    if (buffer->start == buffer->end) {
        buffer->start = 0;
        buffer->end = 0;
        buffer->counters.system_reads += 1;
        /* A read as large as the buffer gains nothing from it: straight into libmosquitto's packet. */
        if (count >= buffer->capacity) return read(fd, destination, count);
        ssize_t received = read(fd, buffer->data, buffer->capacity);
        /* End of stream and errors (errno as `read` set it, EAGAIN included) go to libmosquitto unchanged. */
        if (received <= 0) return received;
        buffer->end = (size_t)received;
    }
    size_t available = buffer->end - buffer->start;
    size_t handed = count < available ? count : available;
    memcpy(destination, buffer->data + buffer->start, handed);
    buffer->start += handed;
    return (ssize_t)handed;
}

int mosquitto_io_queueing(int on) {
    int before = queueing;
    queueing = on;
    return before;
}

uint64_t mosquitto_io_queueing_skips(void) { return queueing_skips; }

ssize_t mosquitto_io_write(int fd, const void *source, size_t count) {
    if (count == 1 && *(const unsigned char *)source == 0) {
        mosquitto_io_buffer *buffer = entered;
        /* With TLS (no socket buffered, -1) OpenSSL writes the socket, so a byte of libmosquitto's is this too. */
        if (buffer != NULL && fd != buffer->fd) {
            buffer->counters.skipped_wakeups += 1;
            return 1;
        }
        if (queueing) {
            queueing_skips += 1;
            return 1;
        }
    }
    return write(fd, source, count);
}

/* MARK: Patching libmosquitto's imports */

#if MOSQUITTO_IO_PATCHES

/* glibc stores the dynamic section's addresses relocated; some loaders leave them relative to the base. */
static const void *dynamic_address(ElfW(Addr) base, ElfW(Addr) value) {
    return (const void *)(value < base ? base + value : value);
}

/* 64-bit targets only (the ones Swift on Linux builds for here): ELF64 relocations. */
#if defined(__x86_64__)
#define SLOT_RELOCATION(type) ((type) == R_X86_64_JUMP_SLOT || (type) == R_X86_64_GLOB_DAT)
#elif defined(__aarch64__)
#define SLOT_RELOCATION(type) ((type) == R_AARCH64_JUMP_SLOT || (type) == R_AARCH64_GLOB_DAT)
#else
#define SLOT_RELOCATION(type) 0
#endif

static int patch_slot(void **slot, void *replacement, ElfW(Addr) relro_start, ElfW(Addr) relro_end) {
    uintptr_t page_size = (uintptr_t)sysconf(_SC_PAGESIZE);
    /* The loader makes only the whole pages of PT_GNU_RELRO read-only (its end rounded down): the page with its
     * tail stays writable and holds other data, which must stay writable. */
    ElfW(Addr) protected_start = relro_start & ~(page_size - 1);
    ElfW(Addr) protected_end = relro_end & ~(page_size - 1);
    int read_only = (ElfW(Addr))slot >= protected_start && (ElfW(Addr))slot < protected_end;
    void *page = (void *)((uintptr_t)slot & ~(page_size - 1));
    if (read_only && mprotect(page, page_size, PROT_READ | PROT_WRITE) != 0) return 4;
    __atomic_store_n(slot, replacement, __ATOMIC_SEQ_CST);
    if (read_only) mprotect(page, page_size, PROT_READ);
    return 0;
}

static int patch_library(struct dl_phdr_info *info, size_t size, void *context) {
    (void)size;
    int *result = context;
    const char *name = info->dlpi_name;
    if (name == NULL || strstr(name, "libmosquitto.so") == NULL) return 0;
    ElfW(Addr) base = info->dlpi_addr;
    const ElfW(Dyn) *dynamic = NULL;
    ElfW(Addr) relro_start = 0, relro_end = 0;
    for (ElfW(Half) index = 0; index < info->dlpi_phnum; index++) {
        const ElfW(Phdr) *header = &info->dlpi_phdr[index];
        if (header->p_type == PT_DYNAMIC) dynamic = (const ElfW(Dyn) *)(base + header->p_vaddr);
        if (header->p_type == PT_GNU_RELRO) {
            relro_start = base + header->p_vaddr;
            relro_end = relro_start + header->p_memsz;
        }
    }
    *result = 2;
    if (dynamic == NULL) return 1;
    const ElfW(Sym) *symbols = NULL;
    const char *strings = NULL;
    const ElfW(Rela) *tables[2] = {NULL, NULL};
    size_t sizes[2] = {0, 0};
    int plt_is_rela = 1;
    for (const ElfW(Dyn) *entry = dynamic; entry->d_tag != DT_NULL; entry++) {
        switch (entry->d_tag) {
        case DT_SYMTAB: symbols = dynamic_address(base, entry->d_un.d_ptr); break;
        case DT_STRTAB: strings = dynamic_address(base, entry->d_un.d_ptr); break;
        case DT_JMPREL: tables[0] = dynamic_address(base, entry->d_un.d_ptr); break;
        case DT_PLTRELSZ: sizes[0] = entry->d_un.d_val; break;
        case DT_PLTREL: plt_is_rela = entry->d_un.d_val == DT_RELA; break;
        case DT_RELA: tables[1] = dynamic_address(base, entry->d_un.d_ptr); break;
        case DT_RELASZ: sizes[1] = entry->d_un.d_val; break;
        default: break;
        }
    }
    if (symbols == NULL || strings == NULL || !plt_is_rela) return 1;
    int patched = 0;
    for (int table = 0; table < 2; table++) {
        if (tables[table] == NULL) continue;
        size_t count = sizes[table] / sizeof(ElfW(Rela));
        for (size_t index = 0; index < count; index++) {
            const ElfW(Rela) *relocation = &tables[table][index];
            if (!SLOT_RELOCATION(ELF64_R_TYPE(relocation->r_info))) continue;
            const char *symbol = strings + symbols[ELF64_R_SYM(relocation->r_info)].st_name;
            void *replacement = NULL;
            if (strcmp(symbol, "read") == 0) replacement = (void *)mosquitto_io_read;
            if (strcmp(symbol, "write") == 0) replacement = (void *)mosquitto_io_write;
            if (replacement == NULL) continue;
            int rc = patch_slot((void **)(base + relocation->r_offset), replacement, relro_start, relro_end);
            if (rc != 0) {
                *result = rc;
                return 1;
            }
            patched += 1;
        }
    }
    /* Either is enough to work: reads without the wake-up skip, or the skip without buffered reads. */
    *result = patched > 0 ? 0 : 3;
    return 1;
}

static pthread_once_t install_once = PTHREAD_ONCE_INIT;
static int install_result = 1;

static void install(void) {
    int result = 1;
    dl_iterate_phdr(patch_library, &result);
    install_result = result;
}

int mosquitto_io_install(void) {
    pthread_once(&install_once, install);
    return install_result;
}

int mosquitto_io_available(void) { return 1; }

#else

int mosquitto_io_install(void) { return 5; }

int mosquitto_io_available(void) { return 0; }

#endif
