/* pinning.c - what pinning host memory costs, and whether it holds up
 * another thread's CUDA calls (the measurement behind staging.c's choice of
 * mmap + MAP_POPULATE + cudaHostRegister over cudaHostAlloc).
 *
 * Prints PIN lines (best and worst of 4, per size and method: cudaHostAlloc;
 * cudaHostRegister of memory already faulted in, only the registration
 * timed; cudaHostRegister of fresh memory) and CONTEND lines (one thread pins
 * 32 x 8 MiB while another loops a 4 KiB pinned H2D + synchronize, or a
 * 64 MiB pageable cudaMemcpy: mean and worst of the other thread's calls).
 * GPU only. Build and run:
 *   gcc -O2 -I/usr/local/cuda/include tools/bench/pinning.c -o pinning \
 *       -L/usr/local/cuda/lib64 -lcudart -lpthread -Wl,-rpath,/usr/local/cuda/lib64 && ./pinning
 */
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <stdatomic.h>
static double now_us(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec/1e3;}
#define CK(x) do{cudaError_t e=(x); if(e){printf("%s: %s\n",#x,cudaGetErrorString(e));exit(1);}}while(0)
static atomic_int stop; static int method; static size_t abytes; static int acount;
static void *allocator(void *a){(void)a; CK(cudaSetDevice(0));
  for(int i=0;i<acount;i++){ void *p;
    if(method==0) CK(cudaHostAlloc(&p,abytes,cudaHostAllocPortable));
    else { p=mmap(NULL,abytes,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS|MAP_POPULATE,-1,0); CK(cudaHostRegister(p,abytes,cudaHostRegisterPortable)); }
  } atomic_store(&stop,1); return NULL;}
int main(void){
  CK(cudaSetDevice(0)); CK(cudaFree(0));
  size_t sizes[]={64<<10,256<<10,1<<20,4<<20,8<<20,32<<20};
  for(int m=0;m<3;m++) for(unsigned i=0;i<6;i++){ double best=1e18,worst=0;
    for(int r=0;r<4;r++){ void *p; double t0=now_us();
      if(m==0) CK(cudaHostAlloc(&p,sizes[i],cudaHostAllocPortable));
      else if(m==1){ p=mmap(NULL,sizes[i],PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS|MAP_POPULATE,-1,0); t0=now_us(); CK(cudaHostRegister(p,sizes[i],cudaHostRegisterPortable)); }
      else { p=mmap(NULL,sizes[i],PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0); CK(cudaHostRegister(p,sizes[i],cudaHostRegisterPortable)); }
      double t=now_us()-t0; if(t<best)best=t; if(t>worst)worst=t; }
    printf("PIN method=%s bytes=%zu best_us=%.0f worst_us=%.0f\n", m==0?"hostalloc":m==1?"register_prefaulted(only register timed)":"register_cold",sizes[i],best,worst);}
  /* contention: small pinned copy + sync loop vs an allocating thread */
  void *hp; void *dp; CK(cudaHostAlloc(&hp,1<<20,0)); CK(cudaMalloc(&dp,256<<20)); cudaStream_t s; CK(cudaStreamCreateWithFlags(&s,cudaStreamNonBlocking));
  char *pg=malloc(64<<20); memset(pg,1,64<<20);
  for(method=0;method<2;method++) for(int kind=0;kind<2;kind++){
    abytes=8<<20; acount=32; atomic_store(&stop,0); pthread_t th; double worst=0,sum=0; int n=0;
    double t0=now_us(); pthread_create(&th,NULL,allocator,NULL);
    while(!atomic_load(&stop)){ double a=now_us();
      if(kind==0){ CK(cudaMemcpyAsync(dp,hp,4096,cudaMemcpyHostToDevice,s)); CK(cudaStreamSynchronize(s)); }
      else CK(cudaMemcpy(dp,pg,64<<20,cudaMemcpyHostToDevice));
      double d=now_us()-a; if(d>worst)worst=d; sum+=d; n++; }
    pthread_join(th,NULL);
    printf("CONTEND alloc=%s 32x8MiB took %.1f ms; other thread %s: n=%d mean_us=%.1f worst_us=%.1f\n", method==0?"hostalloc":"register_prefaulted", (now_us()-t0)/1e3, kind==0?"4KiB pinned H2D+sync":"64MiB pageable cudaMemcpy H2D", n, sum/n, worst);
  }
  /* baseline for the pageable copy alone */
  double w=0,sm=0; for(int i=0;i<10;i++){double a=now_us(); CK(cudaMemcpy(dp,pg,64<<20,cudaMemcpyHostToDevice)); double d=now_us()-a; sm+=d; if(d>w)w=d;}
  printf("BASE 64MiB pageable H2D alone mean_us=%.1f worst_us=%.1f\n",sm/10,w);
  return 0;}
