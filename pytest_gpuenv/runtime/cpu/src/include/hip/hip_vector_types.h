// <hip/hip_vector_types.h> for the CPU executor (pytest-gpuenv): HIP's vector types as g++ compiles them.
// Follows ROCm's amd_detail/amd_hip_vector_types.h: HIP_vector_type<T, n> with .x .y .z .w and .data[i];
// sizes and alignments of clang's ext_vector_type (n = 1, 2, 4: size = alignment = n * sizeof(T)) and of
// HIP's 3-element struct (size 3 * sizeof(T), alignment of T); an explicit broadcast constructor from a
// scalar, one from n values; element-wise + - * / (and % ^ | & << >> ~ for integers) between vectors and
// with scalars (converted to a vector first), compound assignments, ++/--, unary -, and == / != that
// compare every element.
#pragma once
#include <type_traits>

template <typename T, unsigned n> struct gpuenv_vec_data;
template <typename T> struct gpuenv_vec_data<T, 1> { union { T data[1]; struct { T x; }; }; };
template <typename T> struct gpuenv_vec_data<T, 2> { union { T data[2]; struct { T x, y; }; }; };
template <typename T> struct gpuenv_vec_data<T, 3> { union { T data[3]; struct { T x, y, z; }; }; };
template <typename T> struct gpuenv_vec_data<T, 4> { union { T data[4]; struct { T x, y, z, w; }; }; };

template <typename T, unsigned n>
struct alignas(n == 3 ? alignof(T) : n * sizeof(T)) HIP_vector_type : gpuenv_vec_data<T, n> {
    using value_type = T;
    HIP_vector_type() = default;
    template <typename U, typename std::enable_if<std::is_convertible<U, T>::value>::type* = nullptr>
    explicit constexpr HIP_vector_type(U v) noexcept {
        for (unsigned i = 0; i < n; i++) this->data[i] = static_cast<T>(v);
    }
    template <typename... Us, typename std::enable_if<(sizeof...(Us) == n && n > 1)>::type* = nullptr>
    constexpr HIP_vector_type(Us... vs) noexcept {
        T a[n] = {static_cast<T>(vs)...};
        for (unsigned i = 0; i < n; i++) this->data[i] = a[i];
    }
    HIP_vector_type& operator++() noexcept { return *this += HIP_vector_type{1}; }
    HIP_vector_type operator++(int) noexcept { HIP_vector_type t = *this; ++*this; return t; }
    HIP_vector_type& operator--() noexcept { return *this -= HIP_vector_type{1}; }
    HIP_vector_type operator--(int) noexcept { HIP_vector_type t = *this; --*this; return t; }
    HIP_vector_type operator-() const noexcept {
        HIP_vector_type r;
        for (unsigned i = 0; i < n; i++) r.data[i] = -this->data[i];
        return r;
    }
    template <typename U = T, typename std::enable_if<std::is_integral<U>::value>::type* = nullptr>
    HIP_vector_type operator~() const noexcept {
        HIP_vector_type r;
        for (unsigned i = 0; i < n; i++) r.data[i] = ~this->data[i];
        return r;
    }
#define GPUENV_VEC_CASSIGN(op)                                                                        \
    HIP_vector_type& operator op##=(const HIP_vector_type& o) noexcept {                             \
        for (unsigned i = 0; i < n; i++) this->data[i] op## = o.data[i];                               \
        return *this;                                                                                \
    }                                                                                                \
    template <typename U, typename std::enable_if<std::is_convertible<U, T>::value>::type* = nullptr> \
    HIP_vector_type& operator op##=(U o) noexcept { return *this op## = HIP_vector_type{o}; }
    GPUENV_VEC_CASSIGN(+)
    GPUENV_VEC_CASSIGN(-)
    GPUENV_VEC_CASSIGN(*)
    GPUENV_VEC_CASSIGN(/)
    GPUENV_VEC_CASSIGN(%)
    GPUENV_VEC_CASSIGN(^)
    GPUENV_VEC_CASSIGN(|)
    GPUENV_VEC_CASSIGN(&)
    GPUENV_VEC_CASSIGN(<<)
    GPUENV_VEC_CASSIGN(>>)
#undef GPUENV_VEC_CASSIGN
};

#define GPUENV_VEC_BINOP(op)                                                                               \
    template <typename T, unsigned n>                                                                      \
    inline HIP_vector_type<T, n> operator op(HIP_vector_type<T, n> a, const HIP_vector_type<T, n>& b) noexcept { \
        return a op## = b;                                                                                 \
    }                                                                                                      \
    template <typename T, unsigned n, typename U,                                                          \
              typename std::enable_if<std::is_convertible<U, T>::value>::type* = nullptr>                  \
    inline HIP_vector_type<T, n> operator op(HIP_vector_type<T, n> a, U b) noexcept {                      \
        return a op## = HIP_vector_type<T, n>{b};                                                          \
    }                                                                                                      \
    template <typename T, unsigned n, typename U,                                                          \
              typename std::enable_if<std::is_convertible<U, T>::value>::type* = nullptr>                  \
    inline HIP_vector_type<T, n> operator op(U a, const HIP_vector_type<T, n>& b) noexcept {               \
        return HIP_vector_type<T, n>{a} op## = b;                                                          \
    }
GPUENV_VEC_BINOP(+)
GPUENV_VEC_BINOP(-)
GPUENV_VEC_BINOP(*)
GPUENV_VEC_BINOP(/)
GPUENV_VEC_BINOP(%)
GPUENV_VEC_BINOP(^)
GPUENV_VEC_BINOP(|)
GPUENV_VEC_BINOP(&)
GPUENV_VEC_BINOP(<<)
GPUENV_VEC_BINOP(>>)
#undef GPUENV_VEC_BINOP

template <typename T, unsigned n>
inline bool operator==(const HIP_vector_type<T, n>& a, const HIP_vector_type<T, n>& b) noexcept {
    for (unsigned i = 0; i < n; i++)
        if (!(a.data[i] == b.data[i])) return false;
    return true;
}
template <typename T, unsigned n, typename U, typename std::enable_if<std::is_convertible<U, T>::value>::type* = nullptr>
inline bool operator==(const HIP_vector_type<T, n>& a, U b) noexcept { return a == HIP_vector_type<T, n>{b}; }
template <typename T, unsigned n, typename U, typename std::enable_if<std::is_convertible<U, T>::value>::type* = nullptr>
inline bool operator==(U a, const HIP_vector_type<T, n>& b) noexcept { return HIP_vector_type<T, n>{a} == b; }
template <typename T, unsigned n>
inline bool operator!=(const HIP_vector_type<T, n>& a, const HIP_vector_type<T, n>& b) noexcept { return !(a == b); }
template <typename T, unsigned n, typename U, typename std::enable_if<std::is_convertible<U, T>::value>::type* = nullptr>
inline bool operator!=(const HIP_vector_type<T, n>& a, U b) noexcept { return !(a == b); }
template <typename T, unsigned n, typename U, typename std::enable_if<std::is_convertible<U, T>::value>::type* = nullptr>
inline bool operator!=(U a, const HIP_vector_type<T, n>& b) noexcept { return !(a == b); }

#define GPUENV_VEC_TYPES(name, T)                                                                     \
    using name##1 = HIP_vector_type<T, 1>;                                                             \
    using name##2 = HIP_vector_type<T, 2>;                                                             \
    using name##3 = HIP_vector_type<T, 3>;                                                             \
    using name##4 = HIP_vector_type<T, 4>;                                                             \
    inline constexpr name##1 make_##name##1(T x) noexcept { return name##1{x}; }                        \
    inline constexpr name##2 make_##name##2(T x, T y) noexcept { return name##2{x, y}; }                \
    inline constexpr name##3 make_##name##3(T x, T y, T z) noexcept { return name##3{x, y, z}; }        \
    inline constexpr name##4 make_##name##4(T x, T y, T z, T w) noexcept { return name##4{x, y, z, w}; }
GPUENV_VEC_TYPES(uchar, unsigned char)
GPUENV_VEC_TYPES(char, char)
GPUENV_VEC_TYPES(ushort, unsigned short)
GPUENV_VEC_TYPES(short, short)
GPUENV_VEC_TYPES(uint, unsigned int)
GPUENV_VEC_TYPES(int, int)
GPUENV_VEC_TYPES(ulong, unsigned long)
GPUENV_VEC_TYPES(long, long)
GPUENV_VEC_TYPES(ulonglong, unsigned long long)
GPUENV_VEC_TYPES(longlong, long long)
GPUENV_VEC_TYPES(float, float)
GPUENV_VEC_TYPES(double, double)
#undef GPUENV_VEC_TYPES

static_assert(sizeof(float3) == 12 && alignof(float3) == 4 && sizeof(float4) == 16 && alignof(float4) == 16,
              "HIP's vector layout");
static_assert(sizeof(double4) == 32 && alignof(double4) == 32 && sizeof(uchar4) == 4 && alignof(float2) == 8,
              "HIP's vector layout");
