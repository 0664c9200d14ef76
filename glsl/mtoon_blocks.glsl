/* std140 uniform blocks shared by the MToon geometry passes (typedef_source); engine/gpu/passes/frame_block.py packs FrameBlock. */
struct FrameBlock {
  mat4 view_projection;
  mat4 shadow_matrix;
  vec4 camera_pos;    /* xyz, w: 1 = orthographic */
  vec4 camera_fwd;    /* xyz unit view direction */
  vec4 camera_right;  /* xyz unit screen right (matcap fallback basis) */
  vec4 world_color;   /* rgb world colour, w: light count */
  vec4 world_sky;     /* rgb GI towards +Z, w: time in seconds (UV animation) */
  vec4 world_ground;  /* rgb GI towards -Z */
  vec4 shadow_params; /* x: depth bias, y: normal offset (both in shadow texels), w: 1 = shadows on */
  vec4 shadow_texel;  /* x: texel size of cascade 0 (world), y: shadowing light index (-1 none), z: tile size (texels), w: PCF radius */
  vec4 viewport;      /* width, height, 1/width, 1/height */
  vec4 light_pos[16];   /* suns: xyz position, w: kind (0 sun) + 4 x (light-link bit + 1) */
  vec4 light_dir[16];   /* xyz direction of travel, w: cos(half spot angle) */
  vec4 light_color[16]; /* rgb MToon light colour (sun; local lamps: at 1 m), w: spot smooth width */
  mat4 cascade_matrix[4]; /* world -> light clip of each shadow cascade (engine/gpu/passes/shadow.py) */
  vec4 cascade_split;     /* view depth where cascade i ends */
  vec4 cascade_blend;     /* view-depth width of the blend band at the end of cascade i */
  vec4 cascade_texel;     /* world size of one shadow texel of cascade i */
  vec4 cascade_params;    /* x: cascade count, y: atlas columns, z: view depth where cascade 0 begins */
  mat4 local_matrix[24];  /* world -> clip of each face of the local lamps' shadow atlas (engine/gpu/passes/local_shadows.py) */
  vec4 local_shadow[4];   /* per shadowed local lamp: x light index, y first face, z faces (1 spot, 6 cube), w texel per metre of depth */
  vec4 local_params;      /* x: shadowed local lamps, y: atlas columns, z: face size (texels) */
  vec4 cluster_params;    /* lamp clusters (engine/gpu/passes/clusters.py): tile pixels, slices, rows per cluster, tiles x */
  vec4 cluster_depth;     /* near, slices per log(depth / near) (or per metre), 1 = linear (ortho), tiles y */
};

struct MToonMaterial {
  vec4 base_color;
  vec4 shade_color;   /* rgb, w: shading shift */
  vec4 emissive;      /* rgb, w: shading toony */
  vec4 matcap_factor; /* rgb, w: GI equalisation */
  vec4 rim_color;     /* rgb, w: rim fresnel power */
  vec4 outline_color; /* rgb, w: outline lighting mix */
  vec4 params0;       /* rim lift, rim lighting mix, normal scale, alpha cutoff */
  vec4 params1;       /* outline width, outline mode (0 none 1 world 2 screen), shift tex scale, alpha mode */
  vec4 uv_anim;       /* scroll x, scroll y, rotation speed, w: receive shadow */
  vec4 metal;         /* metallic, roughness, their channels of tex_metal (0-3 RGBA, 4 luminance, -1 none) */
  vec4 uv_xform[10];  /* per texture slot: offset.xy, scale.zw */
  int tex_mask;
  int pad0;
  int pad1;
  int pad2;
};
